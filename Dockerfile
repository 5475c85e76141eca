# syntax=docker/dockerfile:1
# learner-transfer: multi-stage build. The runtime image holds the compiled JavaScript, the Lua scripts and
# the dashboard's browser files (all in dist/), and production dependencies only. It runs as the non-root
# user `node` (uid 1000) and needs no write to its root filesystem (docker run --read-only, Kubernetes
# readOnlyRootFilesystem): everything it writes goes under /var/lib/learner-transfer, its working
# directory, where the volumes are mounted (docs/operations.md):
#   /var/lib/learner-transfer/spool   SPOOL_DIR: responses not yet in Redis; persistent, per worker slot
#   /var/lib/learner-transfer/out     reports, rejects, and drift reports (DRIFT_REPORT_DIR unset: out/)
#   /var/lib/learner-transfer/audit   the audit archive when AUDIT_ARCHIVE_DIR points here (shared)

FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-fund --no-audit
COPY tsconfig.json ./
COPY scripts ./scripts
COPY src ./src
RUN npm run build && npm prune --omit=dev

FROM node:20-bookworm-slim AS runtime
ENV NODE_ENV=production \
    SPOOL_DIR=/var/lib/learner-transfer/spool
# The code is root's and read-only to the process: nothing it runs can change it.
WORKDIR /app
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json jobs.example.csv ./
COPY bin ./bin
# V8's code cache of every file of dist/, written here: the process may not write to /app, and a command
# without it compiles its code at each start (docs/architecture.md, "Commands load what they use").
RUN node /app/dist/cli/warm.cjs
# The writable places, owned by the user that writes them: a volume mounted on an empty directory of the
# image starts with its owner and mode. The spool and the archive hold learners' data: 0700.
RUN mkdir -p /var/lib/learner-transfer/spool /var/lib/learner-transfer/out /var/lib/learner-transfer/audit \
  && chown -R node:node /var/lib/learner-transfer \
  && chmod 700 /var/lib/learner-transfer/spool /var/lib/learner-transfer/audit
VOLUME ["/var/lib/learner-transfer/spool", "/var/lib/learner-transfer/out", "/var/lib/learner-transfer/audit"]
# Relative paths (out/<run>/, the default spool) resolve here, on the volumes, never in /app.
WORKDIR /var/lib/learner-transfer
USER node
# /healthz of the container's own process, with node (no curl in slim images): the metrics port of
# `work --metrics-port`, the dashboard's port; other commands are healthy while they run.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 CMD ["node", "/app/bin/healthcheck.js"]
# The CLI; the compose file and the manifests pick the command (work, dashboard, simulate, enqueue ...).
ENTRYPOINT ["node", "/app/bin/learner-transfer.js"]
CMD ["--help"]
