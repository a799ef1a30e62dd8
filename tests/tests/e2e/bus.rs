//! The consumer loop against a real NATS server: retry with backoff, dead
//! letters after max_deliver, in-progress acks, poison messages, dedup,
//! replay, drain.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use patchpilot_e2e::{NatsServer, wait_for};
use patchpilot_fleet::Bus;
use patchpilot_fleet::bus::{
    self, BatchHandler, ConsumeOptions, ConsumerMetrics, ConsumerSpec, Delivery, HandlerError, StreamName,
    dead_letter,
};
use patchpilot_fleet::config::{BusConfig, NatsConfig};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

async fn connect(nats: &NatsServer, settings: BusConfig) -> anyhow::Result<Bus> {
    let bus =
        Bus::connect(&NatsConfig { url: nats.url.clone(), ..NatsConfig::default() }, settings, "bus-test")
            .await?;
    bus.ensure_topology().await?;
    Ok(bus)
}

fn spec(durable: &str) -> ConsumerSpec {
    ConsumerSpec { stream: StreamName::Assessments, durable: durable.into(), filter_subject: None }
}

/// Fails until `healthy` is set; records when each delivery arrived.
#[derive(Default)]
struct Flaky {
    healthy: AtomicBool,
    attempts: Mutex<Vec<(i64, Instant)>>,
}

impl BatchHandler for Flaky {
    async fn handle(&self, batch: &[Delivery]) -> Vec<Result<(), HandlerError>> {
        let mut attempts = self.attempts.lock().await;
        batch
            .iter()
            .map(|d| {
                attempts.push((d.delivered, Instant::now()));
                if self.healthy.load(Ordering::SeqCst) {
                    Ok(())
                } else {
                    Err(HandlerError::Retryable("database unavailable".into()))
                }
            })
            .collect()
    }
}

fn spawn_loop<H: BatchHandler + 'static>(
    bus: &Bus,
    durable: &str,
    handler: Arc<H>,
) -> (CancellationToken, tokio::task::JoinHandle<Result<(), bus::Error>>) {
    let token = CancellationToken::new();
    let (bus, spec, stop) = (bus.clone(), spec(durable), token.clone());
    let task = tokio::spawn(async move {
        let mut registry = prometheus_client::registry::Registry::default();
        let metrics = ConsumerMetrics::register(&mut registry);
        bus::run_consumer(
            &bus,
            &spec,
            ConsumeOptions { batch_size: 16, concurrency: 1 },
            handler.as_ref(),
            &metrics,
            stop,
        )
        .await
    });
    (token, task)
}

#[tokio::test]
async fn retryable_failures_back_off_then_dead_letter_and_replay_succeeds() -> anyhow::Result<()> {
    let nats = NatsServer::start().await?;
    let settings = BusConfig {
        ack_wait_secs: 5,
        max_deliver: 3,
        retry_backoff_initial_ms: 200,
        retry_backoff_max_ms: 1_000,
        ..BusConfig::default()
    };
    let bus = connect(&nats, settings).await?;
    let handler = Arc::new(Flaky::default());
    let (stop, task) = spawn_loop(&bus, "flaky", handler.clone());

    let mut headers = async_nats::HeaderMap::new();
    headers.insert("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
    bus.publish_raw("pp.assessment.test".into(), "m-1", headers, bytes::Bytes::from_static(b"payload"))
        .await?;

    let letter = wait_for("a dead letter", Duration::from_secs(20), || async {
        Ok(bus.dead_letters(10).await?.into_iter().next())
    })
    .await?;
    let attempts = handler.attempts.lock().await.clone();
    assert_eq!(
        attempts.iter().map(|a| a.0).collect::<Vec<_>>(),
        vec![1, 2, 3],
        "delivered max_deliver times"
    );
    let gaps: Vec<Duration> = attempts.windows(2).map(|w| w[1].1 - w[0].1).collect();
    assert!(gaps[0] >= Duration::from_millis(180), "first retry waits the initial backoff: {gaps:?}");
    assert!(gaps[1] >= Duration::from_millis(380), "second retry waits twice as long: {gaps:?}");
    assert_eq!(letter.deliveries, 3);
    assert_eq!(letter.original_subject, "pp.assessment.test");
    assert_eq!(letter.consumer, "flaky");
    assert_eq!(letter.reason, "gave up after 3 deliveries: database unavailable");
    let stored = bus.jetstream().get_stream("DEAD_LETTERS").await?.get_raw_message(letter.sequence).await?;
    assert_eq!(
        stored.headers.get("traceparent").map(|v| v.as_str()),
        Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
    );
    assert_eq!(stored.headers.get(dead_letter::headers::MSG_ID).map(|v| v.as_str()), Some("m-1"));

    // The cause is fixed; the operator replays it.
    handler.healthy.store(true, Ordering::SeqCst);
    bus.replay_dead_letter(letter.sequence).await?;
    wait_for("the replay to be handled", Duration::from_secs(10), || async {
        let attempts = handler.attempts.lock().await;
        Ok((attempts.len() == 4).then_some(()))
    })
    .await?;
    assert!(bus.dead_letters(10).await?.is_empty());
    stop.cancel();
    task.await??;
    Ok(())
}

/// Sleeps longer than the ack wait before succeeding.
struct Slow {
    calls: AtomicUsize,
    sleep: Duration,
}

impl BatchHandler for Slow {
    async fn handle(&self, batch: &[Delivery]) -> Vec<Result<(), HandlerError>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(self.sleep).await;
        vec![Ok(()); batch.len()]
    }
}

#[tokio::test]
async fn in_progress_acks_keep_long_work_from_being_redelivered() -> anyhow::Result<()> {
    let nats = NatsServer::start().await?;
    let settings = BusConfig { ack_wait_secs: 3, ..BusConfig::default() };
    let bus = connect(&nats, settings).await?;
    let handler = Arc::new(Slow { calls: AtomicUsize::new(0), sleep: Duration::from_secs(7) });
    let (stop, task) = spawn_loop(&bus, "slow", handler.clone());
    bus.publish_raw(
        "pp.assessment.test".into(),
        "long-1",
        Default::default(),
        bytes::Bytes::from_static(b"x"),
    )
    .await?;
    wait_for("the message to be acknowledged", Duration::from_secs(15), || async {
        Ok((bus.stream_messages(StreamName::Assessments).await? == 0).then_some(()))
    })
    .await?;
    assert_eq!(handler.calls.load(Ordering::SeqCst), 1, "handled once, never redelivered");
    let state = bus.consumer_states(StreamName::Assessments).await?;
    assert_eq!(state[0].redelivered, 0);
    stop.cancel();
    task.await??;
    Ok(())
}

/// Never finishes: stands in for a handler whose process dies mid-work.
struct Hang {
    calls: AtomicUsize,
}

impl BatchHandler for Hang {
    async fn handle(&self, batch: &[Delivery]) -> Vec<Result<(), HandlerError>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        std::future::pending::<()>().await;
        vec![Ok(()); batch.len()]
    }
}

#[tokio::test]
async fn a_message_that_kills_its_handler_is_dead_lettered_without_another_try() -> anyhow::Result<()> {
    let nats = NatsServer::start().await?;
    let settings = BusConfig { ack_wait_secs: 3, max_deliver: 1, ..BusConfig::default() };
    let bus = connect(&nats, settings).await?;
    let first = Arc::new(Hang { calls: AtomicUsize::new(0) });
    let (_, task) = spawn_loop(&bus, "poison", first.clone());
    bus.publish_raw(
        "pp.assessment.test".into(),
        "poison-1",
        Default::default(),
        bytes::Bytes::from_static(b"boom"),
    )
    .await?;
    wait_for("the first delivery", Duration::from_secs(10), || async {
        Ok((first.calls.load(Ordering::SeqCst) == 1).then_some(()))
    })
    .await?;
    // The worker dies: no ack, no nak, no more progress.
    task.abort();

    let second = Arc::new(Slow { calls: AtomicUsize::new(0), sleep: Duration::ZERO });
    let (stop, task) = spawn_loop(&bus, "poison", second.clone());
    let letter = wait_for("the poison message to be dead-lettered", Duration::from_secs(15), || async {
        Ok(bus.dead_letters(10).await?.into_iter().next())
    })
    .await?;
    assert!(letter.reason.starts_with("delivered 2 times without being settled"), "{}", letter.reason);
    assert_eq!(second.calls.load(Ordering::SeqCst), 0, "the next worker never ran it");
    stop.cancel();
    task.await??;
    Ok(())
}

#[tokio::test]
async fn publishing_with_the_same_id_stores_once() -> anyhow::Result<()> {
    let nats = NatsServer::start().await?;
    let bus = connect(&nats, BusConfig::default()).await?;
    let a = bus
        .publish_raw("pp.assessment.test".into(), "same", Default::default(), bytes::Bytes::from_static(b"1"))
        .await?;
    let b = bus
        .publish_raw("pp.assessment.test".into(), "same", Default::default(), bytes::Bytes::from_static(b"1"))
        .await?;
    assert!(!a.duplicate && b.duplicate);
    assert_eq!(bus.stream_messages(StreamName::Assessments).await?, 1);
    // Topology creation is idempotent.
    bus.ensure_topology().await?;
    assert_eq!(bus.stream_messages(StreamName::Assessments).await?, 1);
    Ok(())
}

#[tokio::test]
async fn shutdown_finishes_the_batch_and_hands_back_the_rest() -> anyhow::Result<()> {
    let nats = NatsServer::start().await?;
    let bus = connect(&nats, BusConfig { ack_wait_secs: 30, ..BusConfig::default() }).await?;
    for i in 0..40 {
        bus.publish_raw(
            "pp.assessment.test".into(),
            &format!("d-{i}"),
            Default::default(),
            bytes::Bytes::from_static(b"x"),
        )
        .await?;
    }
    let handler = Arc::new(Slow { calls: AtomicUsize::new(0), sleep: Duration::from_millis(500) });
    let (stop, task) = spawn_loop(&bus, "drain", handler.clone());
    wait_for("the first batch", Duration::from_secs(10), || async {
        Ok((handler.calls.load(Ordering::SeqCst) >= 1).then_some(()))
    })
    .await?;
    stop.cancel();
    task.await??;
    // The handled batch was acked (the loop flushes its acks before it
    // returns; the server removes acked messages from the work queue on
    // its own time, so that is polled for) and the rest was not: the
    // handler had not got through all 40.
    let remaining = wait_for("the handled batch's acks", Duration::from_secs(10), || async {
        let n = bus.stream_messages(StreamName::Assessments).await?;
        Ok((n < 40).then_some(n))
    })
    .await?;
    assert!(remaining > 0, "{remaining}");
    // Whatever was fetched but not handled was nak'd, not left to time out:
    // a new worker gets everything that remains at once (well inside the
    // 30 s ack wait).
    let next = Arc::new(Slow { calls: AtomicUsize::new(0), sleep: Duration::ZERO });
    let (stop, task) = spawn_loop(&bus, "drain", next.clone());
    wait_for("the rest to be handled", Duration::from_secs(10), || async {
        Ok((bus.stream_messages(StreamName::Assessments).await? == 0).then_some(()))
    })
    .await?;
    stop.cancel();
    task.await??;
    Ok(())
}
