//! `HOOKCLAIM_METRICS_NAMESPACE`: the CloudWatch namespace of every metric the functions emit,
//! so that two stacks in one account and region keep their metrics, and their alarms, apart.

use super::{bad, ConfigError, Lookup};
use crate::observe;

const SETTING: &str = "HOOKCLAIM_METRICS_NAMESPACE";

/// Reads the namespace, [`observe::DEFAULT_NAMESPACE`] when unset, refusing one CloudWatch
/// would not accept ([`observe::check_namespace`]).
pub(super) fn read_namespace(get: Lookup<'_>) -> Result<String, ConfigError> {
    let Some(namespace) = get(SETTING) else {
        return Ok(observe::DEFAULT_NAMESPACE.to_owned());
    };
    observe::check_namespace(&namespace).map_err(|problem| bad(SETTING, problem))?;
    Ok(namespace)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(value: Option<&str>) -> Result<String, ConfigError> {
        read_namespace(&|k| (k == SETTING).then(|| value.map(str::to_owned)).flatten())
    }

    #[test]
    fn the_namespace_defaults_to_hookclaim_and_a_bad_one_is_refused_naming_the_setting() {
        assert_eq!(read(None).unwrap(), "hookclaim");
        assert_eq!(read(Some("hookclaim/prod")).unwrap(), "hookclaim/prod");
        for bad in ["AWS/Lambda", "hooks*", " hooks", &"n".repeat(256)] {
            let e = read(Some(bad)).unwrap_err();
            assert_eq!(e.setting, SETTING, "{bad}");
            assert!(e.to_string().starts_with(SETTING), "{e}");
        }
    }
}
