-- What a run has spent on each connection, for the connections whose grant
-- carries a budget of its own (GrantedConnection.budget, inside
-- grant_json): {"<connection>": {"requests": n, "bytes": n,
-- "model_tokens": n}}. On the capability's own row, so one UPDATE reserves
-- a call against the run's budget and the connection's at once.
ALTER TABLE broker_capabilities ADD COLUMN connection_used jsonb NOT NULL DEFAULT '{}';
