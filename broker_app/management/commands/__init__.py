"""run_broker and send_message."""
