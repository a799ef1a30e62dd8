-- The holder's last sign of life. A worker running a run refreshes
-- `heartbeat_at` every few seconds; a redelivered run whose holder beat
-- recently is live on that worker (its in-progress acks were lost, as when
-- a NATS node dies), so the next worker waits for it instead of taking it
-- over and booting a second VM. A holder silent for longer is presumed
-- lost and its run is taken over as before. Rows of workers that never
-- beat (older binaries) keep the default and go stale at once.
ALTER TABLE sandbox_runs ADD COLUMN heartbeat_at timestamptz NOT NULL DEFAULT now();
