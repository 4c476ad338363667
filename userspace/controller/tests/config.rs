//! Configuration defaults and validation.

use esn_controller::ControllerConfig;

#[test]
fn defaults() {
    let c = ControllerConfig::default();
    assert_eq!(c.min_samples, 50);
    assert_eq!(c.numa_alpha, 0.2);
    assert_eq!(c.numa_prior, 1.3);
    assert_eq!(c.numa_penalty_override, None);
    assert_eq!(c.lambda, 0.98);
    assert_eq!(c.min_threshold, 1);
    assert_eq!(c.confirm_intervals, 3);
    assert_eq!(c.max_step, 1);
    assert_eq!(c.explore_every, 20);
    assert_eq!(c.validate(), Ok(()));
}

fn rejected(change: impl Fn(&mut ControllerConfig), field: &str) {
    let mut c = ControllerConfig::default();
    change(&mut c);
    let err = c.validate().expect_err(field);
    assert!(err.contains(field), "{field}: {err}");
}

#[test]
fn rejects_what_makes_no_sense() {
    for bad in [0.0, -0.5, 1.0001, f64::NAN, f64::INFINITY] {
        rejected(|c| c.lambda = bad, "lambda");
        rejected(|c| c.numa_alpha = bad, "numa_alpha");
    }
    for bad in [-1.3, 0.0, 0.99, 10.01, f64::NAN, f64::INFINITY] {
        rejected(|c| c.numa_prior = bad, "numa_prior");
        rejected(
            |c| c.numa_penalty_override = Some(bad),
            "numa_penalty_override",
        );
    }
    for bad in [0.0, 0.5, -3.0, f64::NAN, f64::INFINITY] {
        rejected(|c| c.outlier_sigmas = bad, "outlier_sigmas");
    }
    rejected(|c| c.min_samples = 0, "min_samples");
    rejected(|c| c.min_threshold = 0, "min_threshold");
    rejected(|c| c.confirm_intervals = 0, "confirm_intervals");
    rejected(|c| c.max_step = 0, "max_step");
}

#[test]
fn accepts_the_edges_of_the_ranges() {
    let c = ControllerConfig {
        lambda: 1.0,
        numa_alpha: 1.0,
        numa_prior: 1.0,
        numa_penalty_override: Some(10.0),
        outlier_sigmas: 1.0,
        min_samples: 1,
        confirm_intervals: 1,
        explore_every: 0,
        ..ControllerConfig::default()
    };
    assert_eq!(c.validate(), Ok(()));
}

#[test]
fn reads_partial_json_with_defaults_and_refuses_unknown_fields() {
    let c: ControllerConfig = serde_json::from_str(r#"{"lambda": 0.95}"#).unwrap();
    assert_eq!(c.lambda, 0.95);
    assert_eq!(c.max_step, 1);
    assert!(serde_json::from_str::<ControllerConfig>(r#"{"lamda": 0.95}"#).is_err());
}
