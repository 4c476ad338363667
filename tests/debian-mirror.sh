# SPDX-License-Identifier: GPL-2.0-only
# shellcheck shell=bash
#
# The Debian mirror this machine's apt already uses, for the scripts that
# download Debian packages through a private apt configuration
# (tests/vm/setup.sh, tests/fetch-bpftrace.sh). A machine behind a local
# mirror or proxy must not be sent to a public host it may not reach.
#
#   . tests/debian-mirror.sh
#   mirror=$(debian_mirror) || exit 2
#
# ESN_DEBIAN_MIRROR, when set, wins. Otherwise the first "deb" source of the
# Debian archive (a source whose suite is a Debian one) in
# /etc/apt/sources.list and /etc/apt/sources.list.d/ (*.list one-line entries
# and *.sources deb822 stanzas, in apt's order), leaving out the security
# archive (it holds only its own suites). Fails with
# a message saying what to set when there is none. APT_SOURCES_DIR (default
# /etc/apt) is for tests.

# _apt_source_uris: "URI SUITE" lines of every enabled deb source, apt's order.
_apt_source_uris() {
	local etc=${APT_SOURCES_DIR:-/etc/apt} f
	local files=()
	[[ -f $etc/sources.list ]] && files+=("$etc/sources.list")
	for f in "$etc"/sources.list.d/*.list "$etc"/sources.list.d/*.sources; do
		[[ -f $f ]] && files+=("$f")
	done
	((${#files[@]})) || return 0
	awk '
		function flush() {
			if (types ~ /(^| )deb( |$)/ && enabled)
				for (i = 1; i <= nu; i++) for (j = 1; j <= ns; j++) print uris[i], suites[j]
			types = ""; nu = 0; ns = 0; enabled = 1
		}
		FNR == 1 { flush(); deb822 = FILENAME ~ /\.sources$/ }
		!deb822 {
			sub(/#.*/, "")
			if ($1 != "deb") next
			n = 2
			if ($2 ~ /^\[/) { while (n <= NF && $n !~ /\]$/) n++; n++ }
			if (n + 1 <= NF) print $n, $(n + 1)
			next
		}
		/^[ \t]*#/ { next }
		/^[ \t]*$/ { flush(); next }
		{
			key = tolower($1); sub(/:$/, "", key)
			if (key == "types") { types = ""; for (i = 2; i <= NF; i++) types = types " " $i; types = types " " }
			else if (key == "uris") { for (i = 2; i <= NF; i++) uris[++nu] = $i }
			else if (key == "suites") { for (i = 2; i <= NF; i++) suites[++ns] = $i }
			else if (key == "enabled") enabled = tolower($2) != "no"
		}
		END { flush() }
	' "${files[@]}"
}

# Debian's suite names and codenames (the part before any -updates,
# -backports, -security).
_debian_suites='oldoldstable|oldstable|stable|testing|unstable|experimental|sid|buster|bullseye|bookworm|trixie|forky|duke'

# debian_mirror: prints the mirror's URL (no trailing slash).
debian_mirror() {
	if [[ -n ${ESN_DEBIAN_MIRROR:-} ]]; then
		echo "${ESN_DEBIAN_MIRROR%/}"
		return 0
	fi
	local uri suite
	while read -r uri suite; do
		# The archive itself: a Debian suite (a third-party repository names
		# its own, e.g. "cloud-sdk-bookworm"), not the security archive.
		[[ ${suite%%-*} =~ ^($_debian_suites)$ ]] || continue
		[[ $suite == *-security || $uri == *debian-security* ]] && continue
		[[ $uri == http://* || $uri == https://* || $uri == file:/* ]] || continue
		echo "${uri%/}"
		return 0
	done < <(_apt_source_uris)
	echo "no Debian archive among apt's sources (${APT_SOURCES_DIR:-/etc/apt}/sources.list, sources.list.d/): set ESN_DEBIAN_MIRROR to a Debian mirror's URL" >&2
	return 1
}
