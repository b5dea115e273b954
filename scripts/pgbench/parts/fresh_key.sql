-- A fresh key per transaction: :run, :client_id and this client's count :n
-- make it unique; the owner token is the key (unique per attempt, as oke's).
\set n :n + 1
\set key (:run * 1000 + :client_id) * 1000000000 + :n
\set owner :key
