-- Client tokens (docs/api.md, "Client tokens"): who may draw IDs from which
-- sequences, and read them, under --client-auth on. One row per token:
-- `label` names it (unique, in the `seqd_ids_drawn_total{token}` series);
-- `hash` is the SHA-256 of the token in hex, never the token itself;
-- `prefixes` the names it covers, joined by commas (`*`: every name);
-- `rights` `draw`, `read` or `draw,read`; the times are milliseconds since
-- the Unix epoch, `expires_at` and `revoked_at` NULL when not set. A revoked
-- token keeps its row (its label stays taken).
CREATE TABLE seqd_tokens (
    label      VARCHAR(64)   PRIMARY KEY,
    hash       CHAR(64)      NOT NULL UNIQUE,
    prefixes   VARCHAR(8448) NOT NULL,
    rights     VARCHAR(16)   NOT NULL,
    created_at BIGINT        NOT NULL,
    expires_at BIGINT,
    revoked_at BIGINT
);
