# Builds the seqd binary and runs it on a small Debian image.
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin seqd

FROM debian:bookworm-slim
# The system's CA store, which TLS to the database trusts (docs/operations.md,
# "TLS to the database"); the slim image has none.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/*
RUN useradd --system --home /var/lib/seqd --create-home seqd
COPY --from=build /src/target/release/seqd /usr/local/bin/seqd
USER seqd
WORKDIR /var/lib/seqd
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/seqd"]
CMD ["serve"]
