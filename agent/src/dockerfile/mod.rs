//! The Dockerfile model: a lossless parser, what the instructions mean
//! (stages, bases, build arguments), package installs in `RUN` lines, and
//! edits that touch only the tokens they change.

pub mod edit;
pub mod model;
pub mod parse;
pub mod shell;

pub use edit::{Edit, apply};
pub use model::{Arg, Base, ImageRef, Stage};
pub use parse::{Dockerfile, Instruction, ParseError, Span, Word};
