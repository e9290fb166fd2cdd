-- The stripe record of this database (README, "Adding stripes"): at most one
-- row (id = 1). With several --database-url, each database is one stripe of
-- a set, in a fixed order; this row says which: stripe_index (from 0) of
-- stripe_count, with blocks of `block` IDs. seqd writes it when a set is
-- first used (`seqd serve`, `seqd migrate`) or by `seqd stripes init`, and
-- refuses to start when the URLs given do not match the rows (reordered,
-- missing, extra or duplicate URLs). database_id is random text written with
-- the row and never changed: two URLs reading the same one are one database.
CREATE TABLE seqd_stripe (
    id           SMALLINT    NOT NULL,
    stripe_index BIGINT      NOT NULL,
    stripe_count BIGINT      NOT NULL,
    block        BIGINT      NOT NULL,
    database_id  VARCHAR(64) NOT NULL,
    created_at   TIMESTAMP   NOT NULL DEFAULT CURRENT_TIMESTAMP,
    updated_at   TIMESTAMP   NOT NULL DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (id),
    CONSTRAINT seqd_stripe_one_row CHECK (id = 1),
    CONSTRAINT seqd_stripe_index CHECK (stripe_index >= 0 AND stripe_index < stripe_count),
    CONSTRAINT seqd_stripe_block CHECK (block >= 1)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;
