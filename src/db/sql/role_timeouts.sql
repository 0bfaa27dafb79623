-- What the role gives a pooled server connection, as SHOW prints it ("0" is off).
SELECT current_setting('statement_timeout'),
       current_setting('idle_in_transaction_session_timeout')
