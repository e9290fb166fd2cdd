# The seqd image: the binary, built with a pinned toolchain, on a distroless base that
# runs it as a non-root user (docs/deployment.md). tests/in_process/container.rs checks this file.
#
#   docker build -t seqd .        (or: podman build -t seqd .)
#
# No SEQD_ variable is set here: the image has the binary's own defaults (README.md,
# "Configuration"). One of them matters in a container: --listen is 127.0.0.1:8080,
# reachable only from inside the container, so whoever runs the image sets
# SEQD_LISTEN=0.0.0.0:8080 (and SEQD_RESP_LISTEN=0.0.0.0:6380 for the RESP door), as
# docker-compose.yml and deploy/kubernetes/ do. No HEALTHCHECK either: the orchestrator
# probes /healthz and /readyz itself (docs/deployment.md).

# The build: Rust 1.95 on Debian 12, the release the runtime image is built from too.
FROM docker.io/library/rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
# The registry and target/ are cache mounts (BuildKit, Buildah): a rebuild after a change
# to the sources compiles seqd alone, not its dependencies. The binary is copied out of
# the mount within the same step. --locked: Cargo.lock as committed, or the build fails.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin seqd \
    && cp target/release/seqd /usr/local/bin/seqd \
    && mkdir -p /var/lib/seqd

# The runtime: glibc and libgcc (all the binary links: rustls, no OpenSSL; SQLite and the
# time zone database are compiled in), the system's CA store at
# /etc/ssl/certs/ca-certificates.crt (TLS to a managed database verifies against it), no
# shell, no package manager. The nonroot tag runs as user and group 65532.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /usr/local/bin/seqd /usr/local/bin/seqd
# The working directory, writable by the user: the default --database-url,
# sqlite://seqd.db?mode=rwc, is a file here. Mount a volume on it to keep that database
# (with PostgreSQL or MariaDB nothing is written here, and the root filesystem may be
# read-only).
COPY --from=build --chown=65532:65532 /var/lib/seqd /var/lib/seqd
WORKDIR /var/lib/seqd
USER 65532:65532
# HTTP (--listen) and the RESP door (--resp-listen, off unless set).
EXPOSE 8080 6380
ENTRYPOINT ["/usr/local/bin/seqd"]
CMD ["serve"]
