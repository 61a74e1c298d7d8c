// Placeholder: filled in by the EventBusCore work.
