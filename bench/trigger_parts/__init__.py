"""The parts of bench/triggers.py: the workflows it publishes (:mod:`.workflows`), the
brokers and their bursts (:mod:`.brokers`), the polling phase (:mod:`.polls`)."""
