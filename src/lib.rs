//! hookclaim: an exactly-once webhook receiver for AWS Lambda and PostgreSQL.
//!
//! A delivery is verified over its raw bytes ([`verify`]), claimed with one atomic statement
//! ([`store`]), processed in a transaction ([`processor`], [`work`], [`pipeline`]) and answered
//! ([`webhook`]). The [`retention`] function re-drives what died and purges what is old.

pub mod aws;
pub mod config;
pub mod connection;
pub mod db;
pub mod environment;
pub mod forward;
pub mod invocation;
pub mod keys;
pub mod observe;
pub mod pipeline;
pub mod processor;
pub mod retention;
pub mod schema;
pub mod secret;
pub mod store;
pub mod verify;
pub mod webhook;
pub mod work;
