-- Listing pages (GET /v1/sequences, seqd sequences list) compare and order
-- names in byte order, `name COLLATE "C"`, as SQLite and MariaDB do by
-- themselves. The primary key's index is in the database's collation and
-- cannot serve that order: without this index every page sorts the whole
-- table. With it, a page (and a name prefix: the range
-- [prefix, prefix || '{')) reads only its own rows.
-- Reservations change max_id and updated_at only, never name, so they stay
-- HOT updates: this index adds no write to them.
CREATE INDEX IF NOT EXISTS sequences_name_bytes ON sequences (name COLLATE "C");
