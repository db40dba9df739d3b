-- Monthly usage moved to Postgres (usage_monthly there): each materialized view here costs every
-- insert a part write (about 3.5 ms embedded), and an advisory counter does not need to be exact to the event.
DROP VIEW IF EXISTS usage_monthly_mv;
DROP TABLE IF EXISTS usage_monthly;
