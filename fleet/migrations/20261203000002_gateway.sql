-- The credential gateway's secrets, its access-token cache and its refresh
-- leases.
--
-- Ownership: written only by patchpilot-gateway (and the operator's `put`,
-- which is the gateway's library). Nothing else reads these tables: every
-- `sealed` column is AES-256-GCM under the gateway's key file, bound to its
-- connection (and to what it holds) by the AAD, so a row copied to another
-- connection does not open.

-- One long-lived secret per connection: a static key, an OAuth refresh
-- grant or a GitHub App key. `kind` is in the clear for listing only; the
-- authoritative kind is inside the sealed JSON.
CREATE TABLE gateway_secrets (
    connection  text        PRIMARY KEY,
    kind        text        NOT NULL,
    sealed      bytea       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- The last access token minted for a connection. It is served while
-- `refresh_after` is in the future; `expires_at` is what upstream said.
CREATE TABLE gateway_access_tokens (
    connection     text        PRIMARY KEY REFERENCES gateway_secrets (connection) ON DELETE CASCADE,
    sealed         bytea       NOT NULL,
    expires_at     timestamptz NOT NULL,
    refresh_after  timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL DEFAULT now()
);

-- One refresher at a time per connection. A gateway takes the lease with a
-- single upsert where it is free or expired, which bumps `fence`; it writes
-- the refreshed tokens only while `fence` is still its own, so a holder
-- whose lease expired and was taken over changes nothing.
CREATE TABLE gateway_refresh_leases (
    connection  text        PRIMARY KEY REFERENCES gateway_secrets (connection) ON DELETE CASCADE,
    holder      text        NOT NULL,
    fence       bigint      NOT NULL,
    expires_at  timestamptz NOT NULL
);
