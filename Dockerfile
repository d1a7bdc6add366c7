# fairq's container image: one static binary and what it needs to reach
# AWS over TLS, nothing else, so there is no base image to pull, patch or
# scan. `make image` builds the binary (CGO_ENABLED=0, version stamped) and
# stages it with the host's CA bundle and the user files in dist/image,
# the build context:
#
#   make image                      # docker when a daemon answers, else buildah
#   docker build -f Dockerfile dist/image
#
# The process runs as fairq (uid 65532), never root; the root filesystem
# can be mounted read-only (fairq writes no file).
FROM scratch

ARG VERSION=dev
ARG REVISION=unknown
ARG CREATED=unknown

LABEL org.opencontainers.image.title="fairq" \
      org.opencontainers.image.description="Multi-tenant fair-queuing gateway and worker for Amazon SQS" \
      org.opencontainers.image.source="https://github.com/fairq/fairq" \
      org.opencontainers.image.url="https://github.com/fairq/fairq" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}"

COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY passwd /etc/passwd
COPY group /etc/group
COPY fairq /fairq

USER 65532:65532
# The gateway's API, or the worker's probes and metrics (FAIRQ_LISTEN).
EXPOSE 8080
ENTRYPOINT ["/fairq"]
CMD ["version"]
