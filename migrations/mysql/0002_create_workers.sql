-- Snowflake worker-ID leases (README, "Snowflake IDs"): one row per worker ID
-- ever leased, inserted by its first claim.
-- lease_until and last_timestamp are milliseconds since the Unix epoch, from
-- the leasing instance's clock. lease_until = 0: released. last_timestamp is
-- an upper bound of every timestamp issued under this worker ID: a new holder
-- issues only timestamps after it.
-- `owner` is compared byte for byte (ascii_bin).
CREATE TABLE workers (
    worker_id      INT         NOT NULL,
    owner          VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    lease_until    BIGINT      NOT NULL,
    last_timestamp BIGINT      NOT NULL DEFAULT 0,
    updated_at     TIMESTAMP   NOT NULL DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (worker_id),
    CONSTRAINT workers_id_non_negative CHECK (worker_id >= 0)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;
