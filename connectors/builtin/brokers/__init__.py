"""Built-in "Message received" triggers, one connector per message broker.

=================  ====================================  ==================================
connector          node type                             subscription
=================  ====================================  ==================================
``redis_streams``  ``redis_streams.message_received``    a Redis Streams consumer group
``amqp``           ``amqp.message_received``             a RabbitMQ (AMQP 0-9-1) queue
``mqtt``           ``mqtt.message_received``             an MQTT topic filter (QoS 1)
``nats``           ``nats.message_received``             a NATS JetStream durable consumer
=================  ====================================  ==================================

Every one is a ``broker`` listen trigger (:func:`connectors.sdk.listen_trigger`): it
hands each message to ``emit`` and acks it at the broker only after ``emit`` returned,
that is once the message's run is stored. A crash between the two leaves the message
unacked, so the broker delivers it again, with the same event id, and the product starts
no second run for it. A message that is not valid for the trigger (a payload that is not
JSON in ``json`` mode, ...) goes to ``emit.dead_letter`` and is then acked. When the
connection ends, ``listen`` raises :class:`connectors.sdk.ActionError` (kind
``broker_disconnected``) and the product reconnects with backoff; messages wait in the
broker meanwhile. How each picks its event id is in its module. Kafka has no trigger:
no Kafka broker can run where Railyard's tests run, and an untested trigger is not shipped.
"""
