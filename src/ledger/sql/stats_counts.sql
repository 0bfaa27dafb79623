-- Rows by source and status.
SELECT source, status, count(*)
  FROM hookclaim_deliveries
 GROUP BY source, status
 ORDER BY source, status
