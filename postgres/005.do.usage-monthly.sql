-- Accepted events per user and calendar month (UTC, by receive time), for the advisory monthly quota.
-- Written in coalesced increments (about once a second) by every API process.
CREATE TABLE usage_monthly (
  user_id  text NOT NULL REFERENCES users (id),
  month    date NOT NULL,
  events   bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (user_id, month)
);
