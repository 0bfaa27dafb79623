//! Step Functions `StartExecution`, named after the idempotency key: Step Functions refuses a
//! second execution of that name on the state machine for 90 days after the first has ended
//! (`ExecutionAlreadyExists`), which counts as done.

use aws_sdk_sfn::operation::start_execution::StartExecutionError;

use super::{json_message, sdk_failure, DestinationError};
use crate::processor::Delivery;

/// One state machine.
pub(super) struct StepFunctions {
    state_machine_arn: String,
}

impl StepFunctions {
    pub(super) fn new(state_machine_arn: &str) -> Self {
        StepFunctions {
            state_machine_arn: state_machine_arn.to_owned(),
        }
    }

    /// Starts one execution of `d` (input: the payload with the delivery's names, or a claim check); its ARN, or a note
    /// that the execution had been started before.
    pub(super) async fn send(
        &self,
        client: &aws_sdk_sfn::Client,
        d: &Delivery,
        max_bytes: Option<usize>,
    ) -> Result<Option<String>, DestinationError> {
        let (input, _) = json_message(d, max_bytes, 0);
        let started = client
            .start_execution()
            .state_machine_arn(&self.state_machine_arn)
            .name(execution_name(d))
            .input(input)
            .send()
            .await;
        match started {
            Ok(out) => Ok(Some(out.execution_arn().to_owned())),
            Err(e) if matches!(e.as_service_error(), Some(StartExecutionError::ExecutionAlreadyExists(_))) => {
                Ok(Some("execution already exists".into()))
            }
            Err(e) => Err(sdk_failure("StartExecution", &e)),
        }
    }
}

/// The execution's name: the idempotency key, which is at most 80 characters of the allowed set
/// (letters, digits, `-` and `_`) by construction (`hookclaim-` and 40 hex digits).
pub(super) fn execution_name(d: &Delivery) -> String {
    d.idempotency_key()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_execution_name_is_the_key_and_within_the_rules() {
        let d = Delivery {
            source: "a-very-long-source-name".into(),
            delivery_id: "x".repeat(512),
            event_type: None,
            payload: Vec::new(),
            headers: Default::default(),
            attempt: 1,
        };
        let name = execution_name(&d);
        assert_eq!(name, d.idempotency_key());
        assert!(name.len() <= 80);
        assert!(name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
    }
}
