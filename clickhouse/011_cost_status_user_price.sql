-- Users set their own model prices (/v1/me/model-prices): an event priced by one says so in cost_status.
ALTER TABLE events COMMENT COLUMN cost_usd 'USD cost, fixed at ingestion and rounded once to nano-dollars: by the price the user set for the model, else by the @pydantic/genai-prices catalogue bundled with the running release';
ALTER TABLE events COMMENT COLUMN cost_status 'priced (by the catalogue) | user_price (by the price the user set for the model) | unknown_model (no price: cost 0) | no_model (cost 0)';
