-- The sequences table of DESIGN.md ("Table"): one row per named sequence.
-- max_id is the highest ID reserved so far (a sequence starting at `start`
-- has max_id = start - 1); step is the base segment size.
-- created_at/updated_at are TIMESTAMP WITHOUT TIME ZONE; seqd's sessions run
-- with TimeZone = UTC, so the values it writes are UTC.
CREATE TABLE sequences (
    name        VARCHAR(128) PRIMARY KEY,
    max_id      BIGINT       NOT NULL,
    step        BIGINT       NOT NULL CHECK (step >= 1),
    description VARCHAR(256) NOT NULL DEFAULT '',
    created_at  TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP,
    updated_at  TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP
);
