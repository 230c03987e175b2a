"""The transaction coordinator's APIs (InitProducerId with a transactional id is in ``broker``)."""
