-- The stripe record of this database (README, "Adding stripes"): at most one
-- row (id = 1). With several --database-url, each database is one stripe of
-- a set, in a fixed order; this row says which: stripe_index (from 0) of
-- stripe_count, with blocks of `block` IDs. seqd writes it when a set is
-- first used (`seqd serve`, `seqd migrate`) or by `seqd stripes init`, and
-- refuses to start when the URLs given do not match the rows (reordered,
-- missing, extra or duplicate URLs). database_id is random text written with
-- the row and never changed: two URLs reading the same one are one database.
CREATE TABLE seqd_stripe (
    id           INTEGER     NOT NULL PRIMARY KEY CHECK (id = 1),
    stripe_index BIGINT      NOT NULL CHECK (stripe_index >= 0),
    stripe_count BIGINT      NOT NULL CHECK (stripe_count >= 1 AND stripe_index < stripe_count),
    block        BIGINT      NOT NULL CHECK (block >= 1),
    database_id  VARCHAR(64) NOT NULL,
    created_at   TIMESTAMP   NOT NULL DEFAULT CURRENT_TIMESTAMP,
    updated_at   TIMESTAMP   NOT NULL DEFAULT CURRENT_TIMESTAMP
);
