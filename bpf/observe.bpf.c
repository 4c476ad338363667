/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * scx_esn observe: the block I/O half of scx_esn without the scheduler.
 *
 * The same attribution (iotrace.bpf.h) and request tracking (blkobs.bpf.h)
 * the scheduler loads, in an object with no struct_ops, so it loads on
 * kernels without sched_ext and on machines where the scheduler is not
 * wanted. Userspace reads the maps exactly as it does for a scheduler run.
 */
#include <scx/common.bpf.h>

#include "intf.h"
#include "topo.bpf.h"
#include "iotrace.bpf.h"
#include "blkobs.bpf.h"

char _license[] SEC("license") = "GPL";
