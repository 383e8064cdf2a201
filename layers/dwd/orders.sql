SELECT o.order_id,
       o.user_id,
       coalesce(u.city, 'unknown') AS city,
       o.product_id,
       coalesce(p.category, 'unknown') AS category,
       o.quantity,
       CAST(o.amount AS DECIMAL(12, 2)) AS amount,
       upper(coalesce(o.currency, 'EUR')) AS currency,
       o.event_time,
       to_date(o.event_time) AS event_date
FROM source o
LEFT JOIN dim_users u ON o.user_id = u.user_id AND u.is_current
LEFT JOIN dim_products p ON o.product_id = p.product_id
WHERE o.order_id IS NOT NULL
