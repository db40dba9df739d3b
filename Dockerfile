FROM node:20-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json ./
# npm ci refuses this lock file (it omits other platforms' optional packages); install the locked versions.
RUN npm install --omit=dev --no-audit --no-fund
COPY . .
ENV HOST=0.0.0.0 PORT=3000
EXPOSE 3000
CMD ["node", "--import", "tsx", "src/main.ts"]
