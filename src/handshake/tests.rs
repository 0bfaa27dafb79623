//! Handshake tests.
