-- The sequences table of DESIGN.md ("Table"): one row per named sequence.
-- max_id is the highest ID reserved so far (a sequence starting at `start`
-- has max_id = start - 1); step is the base segment size.
-- CURRENT_TIMESTAMP is UTC text 'YYYY-MM-DD HH:MM:SS' in SQLite.
CREATE TABLE sequences (
    name        VARCHAR(128) NOT NULL PRIMARY KEY,
    max_id      BIGINT       NOT NULL,
    step        BIGINT       NOT NULL CHECK (step >= 1),
    description VARCHAR(256) NOT NULL DEFAULT '',
    created_at  TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP,
    updated_at  TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP
);
