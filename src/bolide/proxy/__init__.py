"""The RocketMQ 5.x gRPC front end: ``apache.rocketmq.v2.MessagingService`` over remoting
requests to name servers and brokers (POP codes for consumption). See docs/5x-clients.md."""
