SELECT order_id,
       user_id,
       CAST(amount AS DECIMAL(12, 2)) AS amount,
       upper(coalesce(currency, 'EUR')) AS currency,
       event_time,
       to_date(event_time) AS event_date
FROM source
WHERE order_id IS NOT NULL
