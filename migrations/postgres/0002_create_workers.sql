-- Snowflake worker-ID leases (README, "Snowflake IDs"): one row per worker ID
-- ever leased, inserted by its first claim.
-- lease_until and last_timestamp are milliseconds since the Unix epoch, from
-- the leasing instance's clock. lease_until = 0: released. last_timestamp is
-- an upper bound of every timestamp issued under this worker ID: a new holder
-- issues only timestamps after it.
CREATE TABLE workers (
    worker_id      INTEGER     PRIMARY KEY CHECK (worker_id >= 0),
    owner          VARCHAR(64) NOT NULL,
    lease_until    BIGINT      NOT NULL,
    last_timestamp BIGINT      NOT NULL DEFAULT 0,
    updated_at     TIMESTAMP   NOT NULL DEFAULT CURRENT_TIMESTAMP
);
