-- The sequences table of DESIGN.md ("Table"): one row per named sequence.
-- max_id is the highest ID reserved so far (a sequence starting at `start`
-- has max_id = start - 1); step is the base segment size.
-- `name` uses a binary collation so that names are case-sensitive, as on
-- PostgreSQL and SQLite ('Order' and 'order' are two sequences).
-- TIMESTAMP is stored as UTC and read in the session time zone (seqd's
-- sessions use +00:00).
CREATE TABLE sequences (
    name        VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    max_id      BIGINT       NOT NULL,
    step        BIGINT       NOT NULL,
    description VARCHAR(256) NOT NULL DEFAULT '',
    created_at  TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP,
    updated_at  TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (name),
    CONSTRAINT sequences_step_positive CHECK (step >= 1)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;
