-- Column comments that said less than the columns hold: `metadup` rows of the facet counts (022), and
-- the empty tool name of an error that named none in the error-cluster rollups. Comments only: no
-- data changes, and running this again changes nothing.
ALTER TABLE search_facets_hourly
    COMMENT COLUMN facet 'total | type | outcome | model | tool | agentId | costStatus | meta | metadup (a count for each value beyond an event''s first at a path: events holding a path = its meta counts less its metadup count)',
    COMMENT COLUMN key 'the metadata path (facets meta and metadup), else empty',
    COMMENT COLUMN value 'the value counted (empty: not sent; always empty for metadup)';

ALTER TABLE error_clusters_hourly COMMENT COLUMN tools 'tools of the cluster''s events, an empty string for an event that named none';

ALTER TABLE error_clusters_daily COMMENT COLUMN tools 'tools of the cluster''s events, an empty string for an event that named none';
