//! The gateway against real parts: a fresh Postgres database per test, a
//! real mutual-TLS server on loopback, local doubles of an OAuth token
//! endpoint and of GitHub's installation-token route.
//!
//! Postgres comes from `PATCHPILOT_TEST_DATABASE_URL` (`scripts/services up`
//! and `eval "$(scripts/services env)"`); without it the tests fail.

mod github;
mod lease;
mod oauth;
mod sealing;
mod server;
mod support;
