"""The edge: one module per Kafka API, each offering ``api(...)``, its handler bound to what it needs.

``kcoord.app`` (the composition root) calls those factories and adds the specs to its registry;
importing this package registers nothing.
"""
