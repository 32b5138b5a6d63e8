"""The fast generation engine for the CPU: OpenVINO GenAI over a GGUF written from the policy's
own weights (gguf_write.py), behind the policy interface (openvino.py)."""
