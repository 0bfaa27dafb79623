//! AWS clients, made through aws-config so the standard settings apply (region, credentials,
//! and `AWS_ENDPOINT_URL` for a local endpoint in tests).

/// A Secrets Manager client from the environment's AWS configuration.
pub async fn secrets_manager() -> aws_sdk_secretsmanager::Client {
    let config = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    aws_sdk_secretsmanager::Client::new(&config)
}

/// Reads a secret's string value. The error says why, never what the secret holds.
pub async fn secret_string(
    client: &aws_sdk_secretsmanager::Client,
    secret_id: &str,
) -> Result<String, String> {
    let out = client
        .get_secret_value()
        .secret_id(secret_id)
        .send()
        .await
        .map_err(|e| {
            format!(
                "GetSecretValue {secret_id}: {}",
                aws_sdk_secretsmanager::error::DisplayErrorContext(&e)
            )
        })?;
    out.secret_string()
        .map(str::to_owned)
        .ok_or_else(|| format!("secret {secret_id} has no string value"))
}

/// Builds connection settings from a secret in the format RDS manages
/// (`{"username", "password", "host", "port", "dbname"}`; `port` may be a number or a string).
/// The error names the missing field, never a value.
pub fn rds_secret_config(text: &str) -> Result<tokio_postgres::Config, String> {
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|_| "the secret is not a JSON object".to_string())?;
    let field = |name: &str| -> Result<String, String> {
        match v.get(name) {
            Some(serde_json::Value::String(s)) if !s.is_empty() => Ok(s.clone()),
            Some(serde_json::Value::Number(n)) => Ok(n.to_string()),
            _ => Err(format!("the secret has no {name}")),
        }
    };
    let port: u16 = match v.get("port") {
        None => 5432,
        Some(_) => field("port")?
            .parse()
            .map_err(|_| "the secret's port is not a port number".to_string())?,
    };
    let mut pg = tokio_postgres::Config::new();
    pg.user(field("username")?)
        .password(field("password")?)
        .host(field("host")?)
        .port(port)
        .dbname(field("dbname").unwrap_or_else(|_| "postgres".into()))
        .application_name("hookclaim");
    Ok(pg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rds_secret_is_read_with_numeric_or_string_port() {
        let pg = rds_secret_config(
            r#"{"username":"app","password":"pw","engine":"postgres","host":"db.example","port":5433,"dbname":"hooks"}"#,
        )
        .unwrap();
        assert_eq!(pg.get_user(), Some("app"));
        assert_eq!(pg.get_ports(), &[5433]);
        assert_eq!(pg.get_dbname(), Some("hooks"));
        let pg = rds_secret_config(r#"{"username":"a","password":"p","host":"h","port":"6432"}"#)
            .unwrap();
        assert_eq!(pg.get_ports(), &[6432]);
        assert_eq!(pg.get_dbname(), Some("postgres"));
    }

    #[test]
    fn rds_secret_errors_name_the_field_not_the_value() {
        let err = rds_secret_config(r#"{"username":"a","host":"h"}"#).unwrap_err();
        assert!(err.contains("password"));
        let err =
            rds_secret_config(r#"{"username":"a","password":"hunter2","host":"h","port":"x"}"#)
                .unwrap_err();
        assert!(!err.contains("hunter2"));
        assert!(rds_secret_config("nope").is_err());
    }
}
