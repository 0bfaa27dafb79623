//! hookclaim's integration tests: one binary, one module per area, sharing one throwaway
//! PostgreSQL cluster (`support`). Run one area with `cargo test --test it claim::`.

mod support;

mod aws;
mod chaos;
mod claim;
mod connection;
mod deployed;
mod destinations;
mod e2e;
mod example;
mod forward;
mod guard;
mod harness;
mod library;
mod observability;
mod plans;
mod pooler;
mod reliability;
mod replay;
mod retention;
mod rie;
mod roles;
mod throttle;
mod webhook;
