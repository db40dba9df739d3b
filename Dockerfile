FROM node:24-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json ./
# The lock holds every platform's optional packages: npm ci installs this one's.
RUN npm ci --omit=dev --no-audit --no-fund
COPY . .
# Runs as the image's unprivileged user; /data (the ingest log, the local signing key) is its volume.
RUN mkdir -p /data && chown node:node /data
# The TypeScript loader keeps each module's compiled JavaScript here (src/ts-loader.mjs).
RUN mkdir -p node_modules/.cache/ts-loader && chown node:node node_modules/.cache/ts-loader
USER node
ENV HOST=0.0.0.0 PORT=3000 DATA_DIR=/data
# The analysts' SQL port (8123) stays on the container's loopback, set explicitly: to reach it from the
# host, set ANALYTICS_HOST=0.0.0.0 and publish it to the host's loopback (-p 127.0.0.1:8123:8123).
ENV ANALYTICS_HOST=127.0.0.1
EXPOSE 3000
CMD ["node", "--max-semi-space-size=64", "--import", "./src/ts-loader.mjs", "src/main.ts"]
