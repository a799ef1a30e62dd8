//! The JetStream bus: stream topology, publishing with dedup ids and trace
//! context, the durable consumer loop, and dead-lettering.

mod client;
mod consumer;
pub mod dead_letter;
mod health;
mod topology;
pub mod trace;

pub use client::{Bus, ConsumerState, Error, Outgoing};
pub use consumer::{
    BatchHandler, ConsumeOptions, ConsumerMetrics, ConsumerSpec, Delivery, HandlerError, run_consumer,
};
pub use dead_letter::DeadLetter;
pub use health::BusHealthMetrics;
pub use topology::{StreamName, Topic, subjects, topics};
