# syntax=docker/dockerfile:1
# learner-transfer: multi-stage build. The runtime image holds the compiled JavaScript, the Lua scripts and
# the dashboard's browser files (all in dist/), and production dependencies only, and runs as a non-root user.

FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-fund --no-audit
COPY tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY src ./src
RUN npm run build && npm prune --omit=dev

FROM node:20-bookworm-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build --chown=node:node /app/node_modules ./node_modules
COPY --from=build --chown=node:node /app/dist ./dist
COPY --chown=node:node package.json jobs.example.csv ./
COPY --chown=node:node bin ./bin
# The spool (SPOOL_DIR): a volume mounted here starts owned by the user that writes it.
RUN mkdir -p /var/lib/learner-transfer/spool && chown -R node:node /var/lib/learner-transfer \
  && chmod 700 /var/lib/learner-transfer/spool
USER node
# The CLI; the compose file picks the command (work, dashboard, simulate, enqueue ...).
ENTRYPOINT ["node", "bin/learner-transfer.js"]
CMD ["--help"]
