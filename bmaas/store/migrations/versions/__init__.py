"""One module per schema revision, oldest first (see ``down_revision``)."""
