//! The optional parts of hookclaim (Cargo features, all on by default) that a configuration asks
//! for, checked against the build: a setting whose part was left out stops the cold start,
//! naming the setting and the feature, instead of being ignored.

use super::{Config, ConfigError, DatabaseFrom, ProcessorChoice, SecretsFrom};

/// A part of hookclaim that a build may leave out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// Secrets Manager: `HOOKCLAIM_SECRETS_ARN`, `DATABASE_SECRET_ARN`.
    SecretsManager,
    /// RDS IAM authentication: `DATABASE_IAM_AUTH`.
    RdsIam,
    /// The fan-out processor: `HOOKCLAIM_PROCESSOR=destinations`.
    Destinations,
    /// The HTTP forwarder: `HOOKCLAIM_PROCESSOR=forward`.
    Forward,
}

impl Part {
    /// The Cargo feature that builds it.
    pub fn feature(self) -> &'static str {
        match self {
            Part::SecretsManager => "secrets-manager",
            Part::RdsIam => "rds-iam",
            Part::Destinations => "destinations",
            Part::Forward => "forward",
        }
    }

    /// What it does, for the error.
    fn what(self) -> &'static str {
        match self {
            Part::SecretsManager => "reading secrets from Secrets Manager",
            Part::RdsIam => "RDS IAM authentication",
            Part::Destinations => "the destinations processor",
            Part::Forward => "the forward processor",
        }
    }

    /// Whether this build has it.
    pub fn in_build(self) -> bool {
        match self {
            Part::SecretsManager => cfg!(feature = "secrets-manager"),
            Part::RdsIam => cfg!(feature = "rds-iam"),
            Part::Destinations => cfg!(feature = "destinations"),
            Part::Forward => cfg!(feature = "forward"),
        }
    }
}

/// The error for `setting`, which asks for `part` in a build without it.
pub fn missing(setting: &'static str, part: Part) -> ConfigError {
    ConfigError {
        setting,
        problem: format!(
            "{} needs hookclaim's `{}` feature, which this build was made without (it is on by \
             default; `default-features = false` leaves it out): enable it, or unset {setting}",
            part.what(),
            part.feature()
        ),
    }
}

/// The parts `config` asks for, each with the setting that asks.
fn asked(config: &Config) -> Vec<(&'static str, Part)> {
    let mut asked = Vec::new();
    if matches!(config.secrets, Some(SecretsFrom::SecretsManager { .. })) {
        asked.push(("HOOKCLAIM_SECRETS_ARN", Part::SecretsManager));
    }
    if matches!(config.database.from, DatabaseFrom::SecretsManager { .. }) {
        asked.push(("DATABASE_SECRET_ARN", Part::SecretsManager));
    }
    if matches!(
        config.database.owner,
        Some(DatabaseFrom::SecretsManager { .. })
    ) {
        asked.push(("DATABASE_OWNER_SECRET_ARN", Part::SecretsManager));
    }
    if config.database.iam_auth {
        asked.push(("DATABASE_IAM_AUTH", Part::RdsIam));
    }
    match config.processor {
        ProcessorChoice::Destinations(_) => asked.push(("HOOKCLAIM_PROCESSOR", Part::Destinations)),
        ProcessorChoice::Forward { .. } => asked.push(("HOOKCLAIM_PROCESSOR", Part::Forward)),
        ProcessorChoice::Store => {}
    }
    asked
}

/// Refuses the first setting of `config` that asks for a part `in_build` says is missing
/// ([`Part::in_build`] for this build).
pub(super) fn check(config: &Config, in_build: impl Fn(Part) -> bool) -> Result<(), ConfigError> {
    match asked(config).into_iter().find(|(_, part)| !in_build(*part)) {
        Some((setting, part)) => Err(missing(setting, part)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> Config {
        let mut all = vec![
            ("HOOKCLAIM_SOURCES", r#"{"github":{"kind":"github"}}"#),
            ("HOOKCLAIM_SECRETS", r#"{"github":"s"}"#),
            ("DATABASE_URL", "postgres://u@localhost/db"),
        ];
        all.extend_from_slice(pairs);
        Config::from_lookup(|k| {
            all.iter()
                .rev()
                .find(|(name, _)| *name == k)
                .map(|(_, v)| v.to_string())
        })
        .unwrap()
    }

    /// Settings, the one of them that asks for a part, and the part.
    type Case = (&'static [(&'static str, &'static str)], &'static str, Part);

    #[test]
    fn each_setting_that_asks_for_a_missing_part_is_refused_naming_it_and_the_feature() {
        let cases: &[Case] = &[
            (
                &[("HOOKCLAIM_SECRETS_ARN", "arn:hooks")],
                "HOOKCLAIM_SECRETS_ARN",
                Part::SecretsManager,
            ),
            (
                &[("DATABASE_SECRET_ARN", "arn:db")],
                "DATABASE_SECRET_ARN",
                Part::SecretsManager,
            ),
            (
                &[("DATABASE_OWNER_SECRET_ARN", "arn:owner")],
                "DATABASE_OWNER_SECRET_ARN",
                Part::SecretsManager,
            ),
            (
                &[("DATABASE_IAM_AUTH", "true"), ("DATABASE_IAM_USER", "app")],
                "DATABASE_IAM_AUTH",
                Part::RdsIam,
            ),
            (
                &[
                    ("HOOKCLAIM_PROCESSOR", "destinations"),
                    (
                        "HOOKCLAIM_DESTINATIONS",
                        r#"{"github":[{"kind":"sqs","queue_url":"https://q/1/a"}]}"#,
                    ),
                ],
                "HOOKCLAIM_PROCESSOR",
                Part::Destinations,
            ),
            (
                &[
                    ("HOOKCLAIM_PROCESSOR", "forward"),
                    ("FORWARD_URL", "https://x"),
                ],
                "HOOKCLAIM_PROCESSOR",
                Part::Forward,
            ),
        ];
        for (pairs, setting, part) in cases {
            let c = config(pairs);
            // This build has every part: the configuration is accepted.
            assert_eq!(check(&c, Part::in_build), Ok(()), "{pairs:?}");
            // A build without that part alone refuses it.
            let e = check(&c, |p| p != *part).unwrap_err();
            assert_eq!(e.setting, *setting, "{pairs:?}");
            let text = e.to_string();
            assert!(text.starts_with(setting), "{text}");
            assert!(
                text.contains(&format!("`{}` feature", part.feature())),
                "{text}"
            );
        }
        // Without any part, the plain configuration asks for none.
        assert_eq!(check(&config(&[]), |_| false), Ok(()));
    }
}
