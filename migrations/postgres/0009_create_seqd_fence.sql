-- The failover fence of this database (docs/high-availability.md, "Failover of the
-- database"): one row (id = 1). `server` is the identity of the server seqd last
-- fenced on (PostgreSQL: system identifier and timeline; MySQL/MariaDB: server_id,
-- server_uuid, gtid_domain_id); empty until the first fence. Every seqd checks it
-- on each new connection: a server that is not the recorded one (a promoted
-- replica) is fenced first, once for all instances: every row raised by `margin`
-- in one transaction with this row, which then names the new server, `epoch` one
-- higher.
CREATE TABLE seqd_fence (
    id        SMALLINT     PRIMARY KEY CHECK (id = 1),
    server    VARCHAR(255) NOT NULL,
    epoch     BIGINT       NOT NULL CHECK (epoch >= 0),
    margin    BIGINT       NOT NULL DEFAULT 0 CHECK (margin >= 0),
    fenced_at TIMESTAMP    NULL
);
INSERT INTO seqd_fence (id, server, epoch) VALUES (1, '', 0);
