-- The failover fence (docs/high-availability.md, "Failover of the database"): kept
-- on every backend so the schemas match, never used on SQLite (a file has no
-- replica to be promoted; restoring an old copy is `seqd sequences bump`'s case).
CREATE TABLE seqd_fence (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    server    TEXT    NOT NULL,
    epoch     INTEGER NOT NULL CHECK (epoch >= 0),
    margin    INTEGER NOT NULL DEFAULT 0 CHECK (margin >= 0),
    fenced_at TEXT    NULL
);
INSERT INTO seqd_fence (id, server, epoch) VALUES (1, '', 0);
